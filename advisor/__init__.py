"""llm-capacity-advisor: watches LLM serving engines and recommends which dial to turn, and by how much."""

__version__ = "0.1.0"
