"""Entry points for schedulers: ``spark-submit``, an EMR step, a Glue job, an Airflow task."""
