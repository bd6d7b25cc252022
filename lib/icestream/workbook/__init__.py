"""Running the workbook as a whole: notebooks headless, reset, and the AWS deployment and its policy."""
