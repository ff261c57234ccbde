"""The decision path: submissions in, the batch pipeline (features, model, rules, seal), decisions out.

The public entry point of the scoring path is ``audit.scoring`` (docs/python-api.md).
"""
