// Package network gives sessions controlled egress: a veth pair per session
// into its network namespace, warren's own nftables table (inet warren) that
// drops by default and never touches rules warren did not make, masquerade
// out of the uplink, and a DNS forwarder per session that answers only the
// names its policy allows and pins their addresses into the session's nft
// sets for the record's TTL. docs/NETWORKING.md is the design.
package network
