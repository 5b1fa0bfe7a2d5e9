"""The NATS Streaming server core.

``main.run(plan)`` runs the process; ``server.StreamingServer`` wires one NATS
connection pair, a store (``stanpkg.stores.base``) and the handlers, which
``handlers.build_handlers`` builds together from what they share
(``handler_context.HandlerContext``):

* ``connect`` — connect, close and ping requests, duplicate client IDs;
* ``heartbeats`` — server → client heartbeats;
* ``publish`` — PubMsg intake, batched storage, PubAcks;
* ``subscribe`` / ``unsubscribe`` — subscription requests and what leaving means;
* ``delivery`` — sending, acks, redelivery, queue groups;
* ``channels`` / ``clients`` / ``subscriptions`` — the in-memory state;
* ``recovery`` — rebuilding that state from a store; ``partitioning`` — channel lists;
* ``serial_requests`` — request ordering; ``log`` — Go-format logging; ``wire`` — hand-built bytes.
"""
