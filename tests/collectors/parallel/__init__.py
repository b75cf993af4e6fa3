"""Tests of the cluster engine (advisor.collectors.parallel); a package so its modules share helpers."""
