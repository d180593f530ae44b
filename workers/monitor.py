"""doclane's Celery app as a module attribute, for Celery's own tools.

``celery -A workers.monitor flower`` (compose.yaml's ``flower`` service) and
``celery -A workers.monitor inspect active`` must reach the workers with doclane's broker
settings, not Celery's defaults: kombu's Redis transport joins the fields of a binding with its
``sep`` option, which doclane sets to ``:``, and a remote-control command sent by an app with
the default separator leaves a reply binding the workers cannot parse. They log a
"Control command error" and the command gets no answer (Flower then shows no workers).

Celery's ``-A`` wants an app object, not a factory, hence this module builds one when imported;
nothing else imports it.
"""

from __future__ import annotations

from workers.app import create_app

app = create_app()
