"""Cluster DNS: a watcher that feeds Services and their endpoints to dnsmasq."""
