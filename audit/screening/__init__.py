"""audit.screening: the sanctions lists a bank loads, sealed, and the screening of its payments.

- ``lists``: a list load is a sealed ``sanctions_list`` record whose payload is the file as
  loaded; which lists are in force is a function of those records (``lists_in_force``);
- ``diff``: what changed between two sealed versions of a list, entry by entry.

The matching itself is ``inference.screening`` (pure computation over list bytes and payments).
"""
