"""Operators: the people behind several pirate domains, told by what their captures share
(analytics and ad accounts, redirects, addresses, favicons, page templates). `signals`
reads them from the captures, `grouping` ties the domains of findings into operators and
keeps the splits reviewers made."""
