"""The segmenter: cuts a fusion into groups that one scheduler each accepts, and
records why neighbours were not merged."""
