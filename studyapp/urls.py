"""Root URL configuration: accounts, worker pages, expert workspace, staff dashboard, API, admin."""

from django.conf import settings
from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

from journey.views import accounts

admin.site.site_header = "CollabSkill study administration"
admin.site.site_title = "CollabSkill study admin"

urlpatterns = [
    path("", accounts.home, name="home"),
    path("accounts/login/", accounts.LoginView.as_view(), name="login"),
    path("accounts/logout/", accounts.LogoutView.as_view(), name="logout"),
    path("accounts/password-reset/", accounts.PasswordResetView.as_view(), name="password_reset"),
    path("accounts/password-reset/sent/", accounts.PasswordResetDoneView.as_view(), name="password_reset_done"),
    path("accounts/reset/<uidb64>/<token>/", accounts.PasswordResetConfirmView.as_view(),
         name="password_reset_confirm"),
    path("accounts/reset/done/", accounts.PasswordResetCompleteView.as_view(), name="password_reset_complete"),
    # Browsers ask for /favicon.ico on every page that names no icon (the admin, raw files): answer it.
    # (The plain static URL: resolving a hashed name here would need the manifest at import time.)
    path("favicon.ico", RedirectView.as_view(url=f"{settings.STATIC_URL}favicon.svg", permanent=True)),
    path("", include("journey.urls")),
    path("expert/", include("experts.urls")),
    path("admin/dashboard/", include("console.dashboard.urls")),
    path("api/", include("console.api.urls")),
    path("admin/", admin.site.urls),
]

# Error pages: the site's templates, or the API's JSON error shape under /api/.
handler400 = "console.api.errors.bad_request"
handler403 = "console.api.errors.permission_denied"
handler404 = "console.api.errors.page_not_found"
handler500 = "console.api.errors.server_error"
