"""The web console of the admin port (issue 34): its JSON API, live views and static pages.

Theory of operation
-------------------
The pages (``static/``: HTML, one script, one stylesheet, charts drawn on a canvas; nothing
built at install, nothing fetched from elsewhere at run time) ask ``/api/...`` for JSON. Every
answer is made of commands run through a ``LocalClient`` (server/local_link.py) logged in as
the HTTP user, so the server's rules decide what the console may see and do: reading needs
what INFO, SCAN and the X* reads need; an action (XCLAIM, XACK, XGROUP DELCONSUMER) needs
that command's permission on the key, and a refusal comes back as Redis's NOPERM text.

The live views are Server-Sent Events: ``/api/tail`` runs XREAD BLOCK on its own connection
and pushes each entry; ``/api/events`` PSUBSCRIBEs to the keyspace notifications. A view's
connection closes when the page goes (CLIENT LIST shows it meanwhile, named
``headwater-console``).

Actions are POSTs with a JSON body: a browser does not send those across sites without asking
(a CORS preflight, never granted here), so another site cannot make a logged-in browser act.
"""
