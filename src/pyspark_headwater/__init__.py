"""Auto-registration hook: PySpark (>= 4.2) imports every top-level ``pyspark_*`` module on the
Python path and registers its ``DefaultSource`` under ``DefaultSource.name()``, here
``headwater``. Nothing else belongs in this module."""

from headwater.spark import HeadwaterDataSource, register

DefaultSource = HeadwaterDataSource

__all__ = ["DefaultSource", "register"]
