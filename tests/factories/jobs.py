"""Background jobs (exports, stability runs) as the staff dashboard queues them."""

from __future__ import annotations

import factory

from studies import models as m


class BackgroundJobFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.BackgroundJob

    kind = "export"
    status = m.BackgroundJob.Status.DONE
