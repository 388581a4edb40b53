"""Pure formulas. They take numbers (floats or numpy arrays) and return numbers:
no printing, no files, no click or rich (STYLE.md)."""
