"""Review aids beside the pipeline: what a spec change does to the API (compat.py, base.py)
and to the generated files (summary.py). They read spec models and file texts; they render and
write nothing."""
