"""Hostile tests: real ``metaquorum serve`` processes on loopback, broken the way
a hostile peer or an operator's bad day breaks them (a duplicate node id, a
deleted snapshot, a read-only data dir, a stepped wall clock). Every process a
test starts is stopped by the test, also when it fails."""
