"""Figures: the catalogue, plotting, each family of figures, and the Fig. 1 token selection."""
