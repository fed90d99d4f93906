"""Reports of a checked run: the rich terminal summary, a self-contained
report.html with plots, and junit.xml for CI."""

from reports.command import add_report_parser, report_command
from reports.html import render_html, write_html
from reports.junit import junit_element, write_junit
from reports.load import NodeEvent, RunReport, load
from reports.terminal import render

__all__ = [
    "NodeEvent",
    "RunReport",
    "add_report_parser",
    "junit_element",
    "load",
    "render",
    "render_html",
    "report_command",
    "write_html",
    "write_junit",
]
