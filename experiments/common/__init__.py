"""What the studies of several families share: the checkout's root (`paths`), their CSV files (`csv_rows`), a page's
table between marker comments (`page_tables`), the summaries at the top of the results pages
(`results_pages`), and the GDP's problems planted on synthetic tracks with the GDP-hourly layout (`gdp_problems`)."""
