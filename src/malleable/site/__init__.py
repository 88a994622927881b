"""The site service: ``malleable manager serve`` managing ordinary users' malleable jobs.

* :mod:`~malleable.site.tag`: the versioned JSON tag users put in a job's comment;
* :mod:`~malleable.site.config`: ``/etc/malleable/manager.toml``;
* :mod:`~malleable.site.adapter`: a Slurm site whose managed jobs are users' tagged jobs;
* :mod:`~malleable.site.daemon`: the long-running service around the one
  :class:`~malleable.manager.Manager`;
* :mod:`~malleable.site.submit`: what ``malleable submit`` does on a login node.

The systemd unit ``malleable-manager.service`` ships beside these modules
(docs/site.md).
"""
