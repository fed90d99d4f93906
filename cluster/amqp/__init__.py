"""AMQP 0-9-1 on the wire: frames, field tables, error codes and the JSON form of
field tables. Imports no other package of the broker."""
