"""A pushdown's token rows: the level pass from symbolic configurations (`symbolic_walk`, `context_rows`), rows
for concrete stacks on demand (`rows`), and the device state vector whose gathers mask on a GPU (`device`,
`device_masks`)."""
