"""The broker side: it speaks to metaquorum over HTTP only."""
