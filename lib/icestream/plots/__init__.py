"""Charts for the notebooks: one module per notebook topic, matplotlib only, axes labelled with units."""
