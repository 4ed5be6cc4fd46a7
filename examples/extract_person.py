"""Extraction into a Pydantic model with a @stcon.program function.

Run: python examples/extract_person.py
"""

from enum import Enum

from pydantic import BaseModel

import stdsl as stcon


class Status(str, Enum):
    approved = "approved"
    pending = "pending"
    rejected = "rejected"


class Applicant(BaseModel):
    name: str
    age: int
    email: str


@stcon.program
def extract(text: str):
    '''
    system """You extract facts from text. Copy names and numbers exactly."""
    user """
    Text: {{ text }}

    Give the applicant as JSON with keys name, age, email, then the status of the application.
    """
    output """{applicant: Applicant}
    Status: {status: Status}"""
    '''


TEXT = (
    "Tomas Lindqvist, 41, wrote to the city orchestra from tomas.lindqvist@example.org asking to "
    "join as a cellist. The board put his application on hold until the autumn auditions."
)

if __name__ == "__main__":
    result = extract(TEXT, model=stcon.load(), max_tokens=120)
    print(result.applicant)
    print(result.status)
    print(result.stats.as_dict())
