"""Delayed and scheduled delivery (docs/scheduled.md): SCHEDULE_TOPIC_XXXX and its timer."""

from tidemq.broker.schedule.deliverer import PROGRESS_GROUP, Deliverer
from tidemq.broker.schedule.service import Destination, ScheduleService
from tidemq.broker.schedule.wheel import TimingWheel

__all__ = ["PROGRESS_GROUP", "Deliverer", "Destination", "ScheduleService",
           "TimingWheel"]
