-- The operators' listings (see listing.go): each page is one query that
-- reads an index from the cursor on. The domains' index by key serves
-- every listing of domains; these serve the filters that few domains
-- match, and the dead letters newest first. Their columns change only
-- when a domain is paused or resumed, or an offset dead-lettered or
-- redriven, so the updates of the hot path (grants, completions, queueing)
-- stay HOT: none of them changes a column an index reads. Creating them
-- locks writes to the tables for as long as it takes.

CREATE INDEX domains_paused ON {{schema}}.domains (domain) WHERE paused;
CREATE INDEX domains_dead ON {{schema}}.domains (domain) WHERE failed > 0;
CREATE INDEX dead_letters_at ON {{schema}}.dead_letters (at, domain, off);
