"""inference.screening: payments' parties and free text against the sanctions lists a bank loads.

- ``entries``: one normalised form (``ListEntry``, ``SanctionsList``) for every list format;
- ``lists``: the parsers, one per published format (OFAC, UN, EU, UK, the bank's own CSV/JSON);
- ``normalise``: names as comparable tokens (script, case, honorifics, legal forms, skeletons);
- ``match``: weighted token alignment with Jaro-Winkler, scores in per-mille;
- ``index``: candidates by token, skeleton and one-typo keys, identifiers and BICs exactly;
- ``screen``: a ``Transaction``'s parties, agents and free text -> ``Screening``.

Pure computation over list bytes and payments: no database, no clock, no network.
"""
