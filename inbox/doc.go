// Package inbox holds on-call's tools over what the ingress recorded:
// the events in the inbox and what the relay made of each (siteops events
// list and show), their replay (siteops events replay), and the record of
// refused deliveries (siteops events list --refused). The tools work on
// the store alone: they need no Temporal and dispatch nothing themselves;
// a replay makes events due again, and the relay of a running ingress
// dispatches them.
package inbox
