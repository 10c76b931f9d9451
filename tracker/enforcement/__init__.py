"""Enforcement: from a finding to its takedown.

- `subscriptions`: who is alerted, about what, how often; `alerts`: the events gathered
  and queued for them; `deliveries`: the delivery log and its retries, through
  `smtp` (the configured relay) and `webhooks` (signed requests);
- `rdap`: registries' answers through IANA's bootstrap files; `recipients`: whom a notice
  goes to (abuse contacts of the registrar and the hosting network, the site's own);
  `sending`: notices e-mailed by a reviewer, one finding or a whole domain;
- `delisting`: search-engine removal requests, exported and re-checked;
- `timeline`: each finding's steps, and the enforcement funnel.

Nothing here writes to a third party unless a reviewer asked for it: alerts go to the
publisher's own subscribers only.
"""
