"""Facts about each operator computed once (where dims come from, what each argument is) and the checks that span sections."""
