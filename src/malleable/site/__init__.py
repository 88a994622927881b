"""The site service: ``malleable manager serve`` managing ordinary users' malleable jobs.

* :mod:`~malleable.site.tag`: the versioned JSON tag users put in a job's comment;
* :mod:`~malleable.site.config`: ``/etc/malleable/manager.toml``;
* :mod:`~malleable.site.port`: what the service needs of a site, in neutral terms (the
  jobs a poll found, the :class:`~malleable.site.port.ServiceSite` protocol);
* :mod:`~malleable.site.adapter`, :mod:`~malleable.site.oarsite`: a Slurm and an OAR site
  whose managed jobs are users' tagged jobs;
* :mod:`~malleable.site.daemon`: the long-running service's state around the one
  :class:`~malleable.manager.Manager` (discovery, counters, status, reload);
  :mod:`~malleable.site.assembly` makes it from its config, :mod:`~malleable.site.driver`
  runs it, :mod:`~malleable.site.status` writes and reads its status file;
* :mod:`~malleable.site.submit`: what ``malleable submit`` does on a login node.

The systemd unit ``malleable-manager.service`` ships beside these modules
(docs/site.md).
"""
