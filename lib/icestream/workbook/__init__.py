"""Running the workbook as a whole: the notebooks headless, JupyterLab, and starting over.

``runner`` (``icestream run``, ``make run``), ``lab`` (``icestream lab``, ``make lab``) and ``reset``
(``icestream reset``). Deploying the jobs on AWS is :mod:`icestream.deploy`.
"""
