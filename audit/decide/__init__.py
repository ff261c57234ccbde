"""The decision path: submissions in, the batch pipeline (features, model, rules, seal), decisions out."""
