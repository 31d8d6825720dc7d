from toolsapp.executors.base import ToolError
from toolsapp.executors.python import python_handler
from toolsapp.models import WeatherReport


@python_handler("get_weather", read_only=True)
def get_weather(args, ctx):
    report = WeatherReport.objects.filter(city__iexact=args["city"].strip()).first()
    if report is None:
        known = ", ".join(WeatherReport.objects.order_by("city").values_list("city", flat=True))
        raise ToolError(f"no weather data for {args['city']!r}; known cities: {known}")
    return {"city": report.city, "temperature_c": report.temperature_c, "conditions": report.conditions}
