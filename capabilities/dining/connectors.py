"""Restaurant sources, and how their listings of one restaurant become one record.

A dining mission asks several services at once: a maps service (where, which cuisine, price
level, phone), a reviews site (ratings, price per person, dietary options) and a reservations
service (which tables are free at a time for a party). Each lists the same restaurant under
its own id and a slightly different name ("Trattoria Bella" / "Trattoria Bella Ristorante" /
"TRATTORIA BELLA"), so `merge_listings` decides which listings are one place: a shared phone
number, or similar names a few hundred metres apart (two branches of "Luigi's" stay two).

The three bundled sources answer deterministically from the plain Python data below (a sample city,
and a few places in the cities travel plans trips to), so the mission runs offline and inside the
Lambda layer; real services implement `RestaurantSource`.
"""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any, Protocol

from missions.core.capability.connectors import ConnectorRejected

DIETARY = ("vegetarian", "vegan", "gluten-free")
WEEKEND = frozenset({"friday", "saturday"})  # evenings the busy places are booked out
DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
DOWNTOWN = (40.7420, -73.9890)  # the sample city's centre: distances are measured from here
SAMPLE_CITY = "new york"  # a search that names no city
# each city's centre: a search measures distances from its city's
CITIES = {SAMPLE_CITY: DOWNTOWN, "paris": (48.8566, 2.3522), "rome": (41.9028, 12.4964), "lisbon": (38.7223, -9.1393)}
SLOT_WINDOW_MINUTES = 90  # the reservations service offers tables this close to the asked time
SAME_PLACE_KM = 0.3  # listings with similar names further apart than this are different branches


@dataclass(frozen=True)
class DiningQuery:
    """What every source is asked: which food, when, for how many, in which city, how far from `origin`
    (the city's centre when None)."""

    cuisine: str | None = None
    day: str | None = None  # a weekday name; None means a weekday
    time: str = "19:30"
    party_size: int = 2
    radius_km: float = 5.0
    city: str | None = None  # None: the sample city
    origin: tuple[float, float] | None = None

    @property
    def weekend(self) -> bool:
        return (self.day or "").lower() in WEEKEND

    @property
    def city_key(self) -> str:
        return (self.city or SAMPLE_CITY).strip().lower()


@dataclass(frozen=True)
class RestaurantListing:
    """One source's view of one restaurant: only the fields that source knows are set."""

    source: str
    source_id: str
    name: str
    address: str
    lat: float
    lon: float
    distance_km: float
    cuisines: tuple[str, ...]
    phone: str | None = None
    price_per_person: float | None = None
    price_level: int | None = None  # 1..4 ("$".."$$$$")
    rating: float | None = None
    review_count: int | None = None
    dietary: tuple[str, ...] = ()
    bookable: bool | None = None  # True: takes reservations through this source
    slots: tuple[str, ...] = ()  # free tables near the asked time ("HH:MM")
    area: str | None = None  # the neighbourhood, where the source names it

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in self.__dict__.items()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RestaurantListing:
        fields_: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
        return cls(**fields_)


@dataclass
class Restaurant:
    """One place, merged from every source that listed it."""

    id: str
    name: str
    address: str
    lat: float
    lon: float
    distance_km: float
    cuisines: list[str]
    sources: list[str]
    source_ids: dict[str, str]
    names: list[str]
    phone: str | None = None
    price_per_person: float | None = None
    price_from: str | None = None  # which source the price came from
    rating: float | None = None
    review_count: int | None = None
    dietary: list[str] = field(default_factory=list)
    bookable: bool | None = None  # None: no reservations source knew it (walk-in or unknown)
    slots: list[str] = field(default_factory=list)
    area: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class RestaurantSource(Protocol):
    """A restaurant service: listings of `query.cuisine` within `query.radius_km` of its origin."""

    name: str

    def search(self, query: DiningQuery) -> list[RestaurantListing]: ...


# --------------------------------------------------------------------------- the sample city


@dataclass(frozen=True)
class _Place:
    key: str
    east_km: float  # offset from DOWNTOWN
    north_km: float
    address: str
    phone: str
    cuisines: tuple[str, ...]
    price: float  # per person
    rating: float
    reviews: int
    dietary: tuple[str, ...]
    names: dict[str, str]  # source -> the name that source uses; absent: not listed there
    weekday_slots: tuple[str, ...] = ()
    weekend_slots: tuple[str, ...] = ()
    max_party: int = 8
    city: str = SAMPLE_CITY  # offsets are from this city's centre
    area: str | None = None


# key, east/north of downtown (km), address, phone, cuisines, $ per person, rating, reviews, dietary options,
# each source's name for it, free tables on weeknights, free tables on Friday and Saturday
# fmt: off
PLACES: tuple[_Place, ...] = (
    _Place(
        "osteria_roma", 0.9, 0.8, "12 Mulberry St", "+1-212-555-0101", ("italian",), 58, 4.7, 1840, ("gluten-free",),
        {"maps": "Osteria Roma", "reviews": "The Osteria Roma", "reservations": "Osteria Roma"},
        ("18:30", "19:30", "21:00"), ("22:00",),
    ),
    _Place(
        "trattoria_bella", -0.5, 0.6, "88 Elm St", "+1-212-555-0102", ("italian",), 42, 4.6, 2210, ("vegetarian",),
        {"maps": "Trattoria Bella", "reviews": "Trattoria Bella Ristorante", "reservations": "TRATTORIA BELLA"},
        ("19:00", "19:30", "20:30"), ("17:30", "21:30"),
    ),
    _Place(
        "la_dolce_vita", 1.2, 1.6, "5 Park Ave", "+1-212-555-0103", ("italian",), 85, 4.8, 960,
        ("vegetarian", "gluten-free"),
        {"maps": "La Dolce Vita", "reviews": "La Dolce Vita", "reservations": "La Dolce Vita"},
        ("19:30", "20:00"), ("19:30",),
    ),
    _Place(
        "luigis_east", 0.4, -0.45, "301 Canal St", "+1-212-555-0104", ("italian", "pizza"), 26, 4.1, 640,
        ("vegetarian",), {"maps": "Luigi's", "reviews": "Luigis Trattoria"},
    ),
    _Place(  # another branch of the same name, far away: must not merge with the one above
        "luigis_harbor", 6.1, -4.3, "9 Harbor Rd", "+1-718-555-0105", ("italian", "pizza"), 26, 4.0, 210,
        ("vegetarian",), {"maps": "Luigi's"},
    ),
    _Place(
        "casa_verde", -1.1, -1.15, "40 Bleecker St", "+1-212-555-0106", ("italian", "vegetarian"), 31, 4.5, 1320,
        ("vegetarian", "vegan"),
        {"maps": "Casa Verde", "reviews": "Casa Verde", "reservations": "Casa Verde Cucina Vegetariana"},
        ("19:00", "20:00"), ("18:00", "22:00"),
    ),
    _Place(
        "pizzeria_napoli", 0.2, 0.85, "17 Spring St", "+1-212-555-0107", ("italian", "pizza"), 19, 4.0, 3100,
        ("vegetarian", "vegan"),
        {"maps": "Pizzeria Napoli", "reviews": "Napoli Pizzeria", "reservations": "Pizzeria Napoli & Bar"},
        ("18:30", "20:00"), ("17:00",),
    ),
    _Place(
        "nonnas_table", 2.0, 1.5, "220 W 10th St", "+1-212-555-0108", ("italian",), 48, 4.3, 780, ("gluten-free",),
        {"maps": "Nonna's Table", "reviews": "Nonnas Table", "reservations": "Nonna's Table"},
        ("19:30", "20:00"), ("21:30",),
    ),
    _Place(
        "pasta_fresca", -2.6, 1.7, "63 Hudson St", "+1-212-555-0109", ("italian",), 34, 4.2, 450, ("vegetarian",),
        {"reviews": "Pasta Fresca", "reservations": "Pasta Fresca"},
        ("18:30", "20:30"), ("20:30",),
    ),
    _Place(
        "il_giardino", 1.5, -1.2, "14 Grand St", "+1-212-555-0110", ("italian",), 55, 4.5, 1100, ("vegetarian",),
        {"maps": "Il Giardino", "reviews": "Ristorante Il Giardino", "reservations": "Il Giardino"},
        ("18:00",), ("18:00", "19:30"),
    ),
    _Place(
        "green_leaf", -0.7, 0.3, "2 Greene St", "+1-212-555-0111", ("vegan", "american"), 24, 4.6, 1500,
        ("vegetarian", "vegan", "gluten-free"), {"maps": "Green Leaf Kitchen", "reviews": "Green Leaf"},
    ),
    _Place(
        "sakura", 1.0, -0.3, "77 Mott St", "+1-212-555-0112", ("japanese", "sushi"), 45, 4.5, 2050, ("gluten-free",),
        {"maps": "Sakura Sushi Bar", "reviews": "Sakura", "reservations": "Sakura Sushi Bar"},
        ("19:30", "20:30"), ("21:30",),
    ),
    _Place(  # two sources, two unrelated names, one phone number
        "taj_spice", -1.8, -0.6, "150 Lexington Ave", "+1-212-555-0113", ("indian",), 27, 4.4, 990,
        ("vegetarian", "vegan", "gluten-free"),
        {"maps": "Taj Spice", "reviews": "Taj Spice", "reservations": "Taj Indian Kitchen"},
        ("19:00", "19:30", "20:00"), ("19:00", "20:00"),
    ),
    _Place(
        "el_mercado", 2.7, -2.1, "410 Broome St", "+1-212-555-0114", ("mexican",), 22, 4.2, 870,
        ("vegetarian", "gluten-free"), {"maps": "El Mercado", "reviews": "El Mercado Taqueria"},
    ),
    _Place(
        "bistro_lumiere", -0.3, 2.2, "9 Gramercy Park", "+1-212-555-0115", ("french",), 95, 4.8, 1200, ("vegetarian",),
        {"maps": "Bistro Lumière", "reviews": "Bistro Lumiere", "reservations": "Bistro Lumière"},
        ("19:30", "21:00"), ("22:00",),
    ),
    _Place(
        "golden_dragon", 0.6, -1.9, "33 Bayard St", "+1-212-555-0116", ("chinese",), 25, 4.0, 530, ("vegetarian",),
        {"maps": "Golden Dragon"},
    ),
    _Place(
        "thai_orchid", -2.2, -1.4, "500 6th Ave", "+1-212-555-0117", ("thai",), 23, 4.3, 720,
        ("vegetarian", "vegan", "gluten-free"),
        {"maps": "Thai Orchid", "reviews": "Orchid Thai Cuisine", "reservations": "Thai Orchid"},
        ("19:30", "20:00"), ("19:30",),
    ),
    # Paris
    _Place(
        "chez_janou", 1.9, -0.2, "2 Rue Roger Verlomme", "+33-1-4272-2841", ("french", "provencal"), 45, 4.5, 2100,
        ("vegetarian",), {"maps": "Chez Janou", "reviews": "Chez Janou Bistrot", "reservations": "Chez Janou"},
        ("19:30", "20:30"), ("21:30",), city="paris", area="Le Marais",
    ),
    _Place(
        "breizh_cafe", 1.3, 0.3, "109 Rue Vieille du Temple", "+33-1-4272-1377", ("french", "crepes"), 30, 4.6,
        3400, ("vegetarian", "gluten-free"), {"maps": "Breizh Café", "reviews": "Breizh Cafe"},
        city="paris", area="Le Marais",
    ),
    _Place(
        "bouillon_chartier", 0.2, 1.6, "7 Rue du Faubourg Montmartre", "+33-1-4770-8629", ("french",), 25, 4.2, 5200,
        (), {"maps": "Bouillon Chartier", "reviews": "Bouillon Chartier Grands Boulevards"},
        city="paris", area="Grands Boulevards",
    ),
    _Place(
        "polidor", -0.6, -1.2, "41 Rue Monsieur le Prince", "+33-1-4326-9534", ("french", "bistro"), 40, 4.3, 1800,
        (), {"maps": "Polidor", "reviews": "Crèmerie Restaurant Polidor", "reservations": "Polidor"},
        ("19:00", "20:00"), ("22:00",), city="paris", area="Latin Quarter",
    ),
    _Place(
        "clown_bar", 2.2, 0.6, "114 Rue Amelot", "+33-1-4355-8735", ("french", "bistro"), 70, 4.5, 900,
        ("vegetarian",), {"maps": "Clown Bar", "reservations": "Clown Bar"},
        ("20:00",), (), city="paris", area="Oberkampf",
    ),
    _Place(
        "septime", 3.1, -0.4, "80 Rue de Charonne", "+33-1-4367-3829", ("french",), 120, 4.7, 1500,
        ("vegetarian",), {"maps": "Septime", "reviews": "Septime", "reservations": "Septime"},
        ("21:30",), (), city="paris", area="Bastille",
    ),
    _Place(
        "wild_and_the_moon", 1.6, 0.1, "55 Rue Charlot", "+33-1-7477-5521", ("vegan",), 28, 4.4, 700,
        ("vegetarian", "vegan", "gluten-free"), {"maps": "Wild & The Moon", "reviews": "Wild and the Moon"},
        city="paris", area="Le Marais",
    ),
    _Place(
        "le_consulat", -0.1, 3.1, "18 Rue Norvins", "+33-1-4606-5063", ("french", "bistro"), 38, 4.1, 2600,
        (), {"maps": "Le Consulat", "reviews": "Le Consulat Montmartre"},
        city="paris", area="Montmartre",
    ),
    # Rome
    _Place(
        "roscioli", -0.9, -0.6, "Via dei Giubbonari 21", "+39-06-687-5287", ("italian", "roman"), 60, 4.6, 4100,
        ("vegetarian",), {"maps": "Roscioli", "reviews": "Roscioli Salumeria con Cucina", "reservations": "Roscioli"},
        ("19:30", "21:00"), ("22:00",), city="rome", area="Campo de' Fiori",
    ),
    _Place(
        "da_panattoni", -1.2, -1.8, "Viale di Trastevere 53", "+39-06-580-0919", ("italian", "pizza"), 25, 4.4, 3300,
        ("vegetarian", "vegan"), {"maps": "Da Panattoni", "reviews": "Pizzeria Da Panattoni"},
        city="rome", area="Trastevere",
    ),
    _Place(
        "armando_al_pantheon", -0.8, 0.0, "Salita dei Crescenzi 31", "+39-06-6880-3034", ("italian", "roman"), 55,
        4.7, 2900, (), {"maps": "Armando al Pantheon", "reviews": "Armando al Pantheon", "reservations": "Armando"},
        ("19:00", "20:30"), ("19:00",), city="rome", area="Pantheon",
    ),
    _Place(
        "mercato_monti", 0.5, -0.3, "Via Leonina 46", "+39-06-481-5912", ("italian",), 35, 4.3, 800,
        ("vegetarian",), {"maps": "Mercato Monti", "reviews": "Trattoria Mercato Monti"},
        city="rome", area="Monti",
    ),
    # Lisbon
    _Place(
        "taberna_flores", -0.6, -0.7, "Rua das Flores 103", "+351-21-347-9418", ("portuguese",), 40, 4.6, 2500,
        ("vegetarian",), {"maps": "Taberna da Rua das Flores", "reviews": "Taberna Rua das Flores"},
        city="lisbon", area="Chiado",
    ),
    _Place(
        "cervejaria_ramiro", 0.9, 1.4, "Avenida Almirante Reis 1", "+351-21-885-1024", ("portuguese", "seafood"), 50,
        4.7, 6100, (), {"maps": "Cervejaria Ramiro", "reviews": "Ramiro", "reservations": "Cervejaria Ramiro"},
        ("19:00", "21:30"), ("22:30",), city="lisbon", area="Anjos",
    ),
    _Place(
        "time_out_market", -0.9, -1.2, "Avenida 24 de Julho 49", "+351-21-395-1274", ("portuguese",), 22, 4.4, 9000,
        ("vegetarian", "vegan"), {"maps": "Time Out Market", "reviews": "Time Out Market Lisboa"},
        city="lisbon", area="Cais do Sodré",
    ),
)
# fmt: on

_KM_PER_DEG_LAT = 110.57


def _where(place: _Place, jitter: int) -> tuple[float, float]:
    """The place's coordinates as one source records them: a few metres off the others'."""
    lat0, lon0 = CITIES[place.city]
    lat = lat0 + place.north_km / _KM_PER_DEG_LAT + jitter * 0.00004
    lon = lon0 + place.east_km / (_KM_PER_DEG_LAT * math.cos(math.radians(lat0))) - jitter * 0.00003
    return round(lat, 6), round(lon, 6)


def distance_km(a: tuple[float, float], b: tuple[float, float]) -> float:
    """Great-circle distance (haversine), good to metres at city scale."""
    lat1, lon1, lat2, lon2 = map(math.radians, (*a, *b))
    h = math.sin((lat2 - lat1) / 2) ** 2 + math.cos(lat1) * math.cos(lat2) * math.sin((lon2 - lon1) / 2) ** 2
    return 6371.0 * 2 * math.asin(math.sqrt(h))


def _minutes(hhmm: str) -> int:
    hours, minutes = hhmm.split(":")
    return int(hours) * 60 + int(minutes)


def parse_time(text: str) -> str:
    """'19:30' as is; anything else is refused (the planner normalizes times)."""
    if not re.fullmatch(r"([01]?\d|2[0-3]):[0-5]\d", text or ""):
        raise ConnectorRejected(f"time '{text}' is not HH:MM")
    hours, minutes = text.split(":")
    return f"{int(hours):02d}:{minutes}"


def _price_level(price: float) -> int:
    return 1 if price < 20 else 2 if price < 40 else 3 if price < 70 else 4


def _matches(place: _Place, query: DiningQuery) -> bool:
    return not query.cuisine or query.cuisine.lower() in place.cuisines


class _SampleSource:
    """Shared search: cuisine and radius filtering, distances from the query's origin."""

    name = ""
    jitter = 0

    def search(self, query: DiningQuery) -> list[RestaurantListing]:
        if query.party_size < 1 or query.party_size > 20:
            raise ConnectorRejected(f"party size {query.party_size} is out of range 1..20")
        if query.radius_km <= 0:
            raise ConnectorRejected("the search radius must be positive")
        parse_time(query.time)
        city = query.city_key
        if city not in CITIES:
            raise ConnectorRejected(f"no restaurants known in '{query.city}' (this source covers {', '.join(CITIES)})")
        origin = query.origin or CITIES[city]
        found = []
        for index, place in enumerate(PLACES):
            if place.city != city or self.name not in place.names or not _matches(place, query):
                continue
            where = _where(place, self.jitter)
            distance = round(distance_km(origin, where), 2)
            if distance <= query.radius_km:
                found.append(self._listing(index, place, where, distance, query))
        return sorted(found, key=lambda listing: (listing.distance_km, listing.source_id))

    def _listing(
        self, index: int, place: _Place, where: tuple[float, float], distance: float, query: DiningQuery
    ) -> RestaurantListing:
        raise NotImplementedError


class MapsSource(_SampleSource):
    """Where places are, their cuisine, price level, phone and a star rating; vegetarian only as a flag."""

    name, jitter = "maps", 0

    def _listing(
        self, index: int, place: _Place, where: tuple[float, float], distance: float, query: DiningQuery
    ) -> RestaurantListing:
        return RestaurantListing(
            source=self.name,
            source_id=f"maps:place-{4100 + index * 7}",
            name=place.names[self.name],
            address=place.address,
            lat=where[0],
            lon=where[1],
            distance_km=distance,
            cuisines=place.cuisines,
            phone=place.phone,
            price_level=_price_level(place.price),
            rating=place.rating,
            dietary=tuple(d for d in place.dietary if d == "vegetarian"),
            area=place.area,
        )


class ReviewsSource(_SampleSource):
    """Ratings with review counts, price per person, and every dietary option reviewers report."""

    name, jitter = "reviews", 1

    def _listing(
        self, index: int, place: _Place, where: tuple[float, float], distance: float, query: DiningQuery
    ) -> RestaurantListing:
        return RestaurantListing(
            source=self.name,
            source_id=f"rv-{20_000 + index * 13}",
            name=place.names[self.name],
            address=place.address.replace(" St", " Street"),
            lat=where[0],
            lon=where[1],
            distance_km=distance,
            cuisines=place.cuisines,
            price_per_person=place.price,
            rating=place.rating,
            review_count=place.reviews,
            dietary=place.dietary,
            area=place.area,
        )


class ReservationsSource(_SampleSource):
    """Bookable places and their free tables within 90 minutes of the asked time, for the party."""

    name, jitter = "reservations", -1

    def _listing(
        self, index: int, place: _Place, where: tuple[float, float], distance: float, query: DiningQuery
    ) -> RestaurantListing:
        asked = _minutes(parse_time(query.time))
        offered = place.weekend_slots if query.weekend else place.weekday_slots
        free = () if query.party_size > place.max_party else offered
        near = tuple(s for s in free if abs(_minutes(s) - asked) <= SLOT_WINDOW_MINUTES)
        return RestaurantListing(
            source=self.name,
            source_id=f"ot-{place.key.replace('_', '-')}",
            name=place.names[self.name],
            address=place.address,
            lat=where[0],
            lon=where[1],
            distance_km=distance,
            cuisines=place.cuisines,
            phone=place.phone.replace("-", " "),
            price_per_person=round(place.price * 0.95),  # the booking site's "average check"
            bookable=True,
            slots=near,
        )


def sample_sources() -> dict[str, RestaurantSource]:
    """The three bundled sources by name, in the order a mission queries them."""
    return {source.name: source for source in (MapsSource(), ReviewsSource(), ReservationsSource())}


# --------------------------------------------------------------------------- de-duplication

_GENERIC = frozenset({"the", "restaurant", "ristorante", "cuisine", "and", "bar", "kitchen", "cucina", "nyc"})


def name_tokens(name: str) -> frozenset[str]:
    """A name's distinctive words: accents, case, apostrophes, '&' and generic words removed."""
    folded = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode().lower()
    folded = folded.replace("'", "").replace("&", " and ")
    words = re.findall(r"[a-z0-9]+", folded)
    distinctive = frozenset(w for w in words if w not in _GENERIC)
    return distinctive or frozenset(words)


def _phone(text: str | None) -> str | None:
    digits = re.sub(r"\D", "", text or "")
    return digits[-10:] if len(digits) >= 10 else None


def similar_names(a: str, b: str) -> bool:
    """One name's words contain the other's, or they share most words ("Napoli Pizzeria")."""
    ta, tb = name_tokens(a), name_tokens(b)
    if not ta or not tb:
        return False
    return ta <= tb or tb <= ta or len(ta & tb) / len(ta | tb) >= 0.6


def same_restaurant(a: RestaurantListing, b: RestaurantListing) -> bool:
    """Same phone number, or similar names within SAME_PLACE_KM of each other."""
    pa, pb = _phone(a.phone), _phone(b.phone)
    if pa and pb and pa == pb:
        return True
    return similar_names(a.name, b.name) and distance_km((a.lat, a.lon), (b.lat, b.lon)) <= SAME_PLACE_KM


_PRICE_OF_LEVEL = {1: 15.0, 2: 30.0, 3: 55.0, 4: 85.0}
_PRICE_PREFERENCE = ("reviews", "reservations", "maps")  # the most specific source first


def merge_listings(listings: list[RestaurantListing]) -> list[Restaurant]:
    """Group listings of the same place (transitively) and merge each group into one Restaurant.

    Listings from one source are never merged with each other: a source lists a place once,
    so two of its listings are two places (the two "Luigi's").
    """
    parent = list(range(len(listings)))
    sources = [{listing.source} for listing in listings]  # per group root

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, a in enumerate(listings):
        for j in range(i + 1, len(listings)):
            ri, rj = root(i), root(j)
            # two groups that both hold a listing from one source are two places
            if ri != rj and not sources[ri] & sources[rj] and same_restaurant(a, listings[j]):
                parent[rj] = ri
                sources[ri] |= sources[rj]
    groups: dict[int, list[RestaurantListing]] = {}
    for i, listing in enumerate(listings):
        groups.setdefault(root(i), []).append(listing)
    merged = [_merge(group) for group in groups.values()]
    _unique_ids(merged)
    return sorted(merged, key=lambda r: (r.distance_km, r.id))


def _merge(group: list[RestaurantListing]) -> Restaurant:
    by_source = {listing.source: listing for listing in group}
    display = by_source.get("maps") or min(group, key=lambda listing: (len(listing.name), listing.source))
    priced = next(
        (by_source[s] for s in _PRICE_PREFERENCE if s in by_source and by_source[s].price_per_person is not None), None
    )
    leveled = next((listing for listing in group if listing.price_level is not None), None)
    if priced is not None:
        price, price_from = priced.price_per_person, priced.source
    elif leveled is not None:
        price, price_from = _PRICE_OF_LEVEL[leveled.price_level or 2], leveled.source
    else:
        price, price_from = None, None
    ratings = [listing.rating for listing in group if listing.rating is not None]
    counts = [listing.review_count for listing in group if listing.review_count is not None]
    booking = [listing for listing in group if listing.bookable is not None]
    return Restaurant(
        id=_slug(display.name),
        name=display.name,
        address=display.address,
        lat=display.lat,
        lon=display.lon,
        distance_km=min(listing.distance_km for listing in group),
        cuisines=sorted({c for listing in group for c in listing.cuisines}),
        sources=sorted(by_source),
        source_ids={listing.source: listing.source_id for listing in group},
        names=sorted({listing.name for listing in group}),
        phone=next((listing.phone for listing in group if listing.phone), None),
        price_per_person=price,
        price_from=price_from,
        rating=round(sum(ratings) / len(ratings), 2) if ratings else None,
        review_count=max(counts) if counts else None,
        dietary=[d for d in DIETARY if any(d in listing.dietary for listing in group)],
        bookable=any(listing.bookable for listing in booking) if booking else None,
        slots=sorted({s for listing in booking for s in listing.slots}),
        area=next((listing.area for listing in group if listing.area), None),
    )


def _slug(name: str) -> str:
    folded = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode().lower().replace("'", "")
    return re.sub(r"[^a-z0-9]+", "-", folded).strip("-") or "place"


def _unique_ids(restaurants: list[Restaurant]) -> None:
    """Ids name a choice the user makes: two branches of one name get their street added."""
    seen: dict[str, int] = {}
    for restaurant in sorted(restaurants, key=lambda r: (r.distance_km, r.address)):
        seen[restaurant.id] = seen.get(restaurant.id, 0) + 1
        if seen[restaurant.id] > 1:
            restaurant.id = f"{restaurant.id}-{_slug(restaurant.address)}"
