"""One reader per format family; each turns a source into lines in a capped sink."""
