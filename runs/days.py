"""A day, as every figure, filter and budget counts it: the site's day (TIME_ZONE), in Python
and in SQL. The metrics page, its rollups, the history's date filters and the daily budget alerts
all take their boundaries from here, so they agree whatever the site's zone."""
from datetime import date, datetime, time

from django.db.models.functions import TruncDate
from django.utils import timezone


def day_of(moment: datetime) -> date:
    """The site's day that `moment` falls in."""
    return timezone.localtime(moment).date()


def day_start(day: date) -> datetime:
    """Midnight at the start of `day` in the site's time zone."""
    return timezone.make_aware(datetime.combine(day, time.min))


class TruncDay(TruncDate):
    """The site's day of a datetime column, in SQL (TruncDate in the current time zone); on SQLite
    with UTC days, the date part of the stored text (UTC) instead, which is the same and faster."""

    def as_sqlite(self, compiler, connection, **extra_context):
        if self.get_tzname() in ("UTC", None):
            sql, params = compiler.compile(self.lhs)
            return f"substr({sql}, 1, 10)", params
        return self.as_sql(compiler, connection, **extra_context)
