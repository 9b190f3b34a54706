"""Typer commands: parse, call one library function, render."""
