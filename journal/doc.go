// Package journal is an operation journal: a majority-durable, encrypted, owner-fenced
// record of one invocation of an outside-world operation (a tool call, a payment).
package journal
