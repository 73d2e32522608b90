"""People in the loop: `emobench play` serves a page where a person plays the user or the supporter."""
