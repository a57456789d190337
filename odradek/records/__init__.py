"""Record batch v2, the compression codecs, and the file regions that carry batches to sockets."""
