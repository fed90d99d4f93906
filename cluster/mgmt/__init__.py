"""The node's management API: HTTP with JSON shaped like RabbitMQ's management plugin.
`mqctl` is its command-line client.

Every request needs HTTP basic authentication with a broker user who has one of the
tags ``management``, ``policymaker``, ``monitoring``, ``administrator``; what each may
do per route is RabbitMQ's (`cluster.mgmt.access`; the table is in the README, under
"Management API permissions"). Users in the node's ``loopback_users`` (guest) are
refused unless they come from a loopback address. Errors are ``{"error": ...,
"reason": ...}``: 401 ``not_authorized`` bad or missing credentials, 401
``not_authorised`` a user refused (RabbitMQ's reasons: ``Not management user``, ``Not
administrator user``, ...), 404 unknown object, 400 bad body (the reason names the
field), 503 ``app_stopped`` while the broker application is stopped. Vhost names are
URL-encoded (``%2F`` is ``/``).

Endpoints::

    GET                 /api/overview
    GET                 /api/nodes
    GET                 /api/nodes/{node}
    POST                /api/nodes/{node}/actions          {"action": "stop_app" | "start_app"}
                                                           {"action": "forget_cluster_node",
                                                            "node": NAME}
    GET                 /api/queues[/{vhost}]
    GET, PUT, DELETE    /api/queues/{vhost}/{name}         PUT {durable, auto_delete, arguments};
                                                           DELETE ?if-unused=true&if-empty=true
    POST                /api/queues/{vhost}/{name}/actions {"action": "sync" | "cancel_sync"}
    GET                 /api/exchanges[/{vhost}[/{name}]]  (amq.default is the default exchange)
    GET                 /api/bindings[/{vhost}]
    GET                 /api/connections, /api/channels, /api/consumers
    GET                 /api/vhosts
    GET, PUT, DELETE    /api/vhosts/{vhost}
    GET                 /api/vhosts/{vhost}/permissions
    GET                 /api/users
    GET, PUT, DELETE    /api/users/{user}                  PUT {password | password_hash, tags}
    GET                 /api/permissions
    GET, PUT, DELETE    /api/permissions/{vhost}/{user}    PUT {configure, write, read}
    GET                 /api/policies[/{vhost}]
    GET, PUT, DELETE    /api/policies/{vhost}/{name}       PUT {pattern, definition, priority,
                                                                apply-to}

Extensions to RabbitMQ's API:

- ``POST /api/nodes/{node}/actions`` runs ``stop_app`` or ``start_app``, or
  ``forget_cluster_node`` of the ``node`` named in the body, which rabbitmqctl does over
  Erlang distribution. The answer (204) comes once the action has
  completed. The management listener stays up while the app is stopped: then
  ``/api/overview`` and ``/api/nodes`` answer with ``"running": false`` (and no totals),
  every other endpoint with 503, and credentials are checked against the users the app
  saved.
- ``/api/overview`` has ``running``; the node objects have ``running`` for the broker
  application, not for the process.
- Queue objects have ``local``: this node's own replica of the queue, ``{"role":
  "master" | "mirror", "messages": N}`` (ready plus unacknowledged), or null when the
  node holds none, so that replicas can be compared across nodes at a quiet moment.
"""

from cluster.mgmt.app import start_management

__all__ = ["start_management"]
