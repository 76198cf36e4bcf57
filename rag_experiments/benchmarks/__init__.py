"""Public test collections (BEIR, SMART/TREC) imported as a corpus folder plus a golden set.

Above golden/ in the layer order: an importer writes golden records, and reads and converts the
collection's documents through corpus/."""
