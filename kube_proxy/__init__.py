"""kube-proxy: one per node, it turns Services and EndpointSlices into iptables rules."""
