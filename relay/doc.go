// Package relay turns the events the ingress recorded in the inbox (the
// store table whose primary key is the event id) into workflow signals:
// the route table says which workflow each event type goes to and how
// that workflow deduplicates it (routes.go), each lane claims its due
// events under a lease (lane.go), lead.created is held back per site to
// go in one signal (coalesce.go), a job is taken to its target
// (dispatch.go), and a failed dispatch backs off until it becomes a dead
// letter (retry.go).
//
// The relay runs in every ingress replica against the shared store; a
// claim's lease keeps two replicas from dispatching one event at once,
// and every target deduplicates by event id, so an event dispatched again
// after a crash changes nothing. The relay never answers a sender: the
// ingress answers as soon as an event is recorded, so Temporal being slow
// or down delays only the relay.
package relay
