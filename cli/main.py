import typer
app = typer.Typer()
@app.command()
def doctor():
    print("hi")
@app.command()
def sql():
    print("sql")
