"""The library's authoring checks (engine.py runs them; a language pack per language under lang/)."""
